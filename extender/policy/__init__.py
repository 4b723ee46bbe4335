"""The policy engine: plugins, their registry, the policy file, and the engine that runs them.

Pure by design: nothing here imports flask, kubernetes or marshmallow, performs IO
on the hot path or keeps globals, so the webhook, the standalone scheduler and
simulate all get the same answer from the same inputs.
"""
