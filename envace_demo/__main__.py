import sys

from envace_demo.cli import main

sys.exit(main())
