"""Where the project and its test data are."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED_BFCL = ROOT.parent / "shared" / "data" / "bfcl"
VENDORED_BFCL = ROOT / "tests" / "data" / "bfcl"
