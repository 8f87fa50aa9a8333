"""The web app (and the Hugging Face Space's entry point): `python app.py`."""

import logging

from envace_demo.settings import Settings
from envace_demo.ui import build_app, launch_options

logging.basicConfig(format="%(asctime)s %(name)s: %(message)s")
logging.getLogger("envace_demo").setLevel(logging.INFO)  # "model ready …" and load failures
settings = Settings.from_env()
demo = build_app(settings)

if __name__ == "__main__":
    demo.launch(**launch_options(settings))
