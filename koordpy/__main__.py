import sys

from koordpy.cli.main import main

sys.exit(main())
