"""The web app (and the Hugging Face Space's entry point): `python app.py`."""

import logging

from envace_demo.settings import Settings
from envace_demo.ui import build_app, launch_options
from envace_demo.ui.gpu import start_model

logging.basicConfig(format="%(asctime)s %(name)s: %(message)s")
logging.getLogger("envace_demo").setLevel(logging.INFO)  # "model ready …" and load failures
# The model for this hardware. On ZeroGPU it is loaded here, at import, in the main thread.
settings, holder = start_model(Settings.from_env())
demo = build_app(settings, holder)

if __name__ == "__main__":
    demo.launch(**launch_options(settings))
