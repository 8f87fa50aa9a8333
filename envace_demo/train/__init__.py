"""Role-wise GRPO fine-tuning (method doc §4) with LoRA, at demo scale.

Modules, one concern each:

- ``config``      TrainConfig: every knob, checked
- ``rollout``     imagined episodes of the engine, cut into rows (group, role, prompt, completion, ids)
- ``rewards``     the task's checklist score; the empty-generation penalty
- ``advantages``  reward minus the mean of the same role in the same group
- ``logprobs``    log-probs of generated tokens, shared prompt prefix computed once
- ``grpo``        the loss: ratio, clip, masked mean over own tokens, k3 KL
- ``policy``      the policy backend: prefix reuse, exact sampled token ids
- ``evaluate``    held-out success without and with rehearsal
- ``trainer``     the loop (torch + peft + accelerate), yielding typed events
- ``events``      those events and the run's result
- ``job``         a run on a background thread, one per app (for the UI)
- ``adapter``     apply a saved adapter to a served backend, or remove it
- ``data``        task sets shipped for training (the bank drills)

Nothing here imports torch at import time except ``grpo``, ``logprobs`` and
``policy``; the CLI and the UI import the rest lazily.
"""
