"""Why a pod goes where it goes: the policy run on every node with each refusal, score and
device or usage figure kept, for `extender explain`, the webhook's /explain endpoint and
simulate's report. Below the three modes, so that each can show the same explanation."""
