from gunicorn.app.base import BaseApplication

class Arbiter:
    WORKER_BOOT_ERROR: int
    APP_LOAD_ERROR: int
    def __init__(self, app: BaseApplication) -> None: ...
