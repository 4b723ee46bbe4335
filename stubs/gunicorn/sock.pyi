import socket
import ssl

from gunicorn.config import Config

def ssl_wrap_socket(sock: socket.socket, conf: Config) -> ssl.SSLSocket: ...
