import sys

from koordpy.cli import main

sys.exit(main())
