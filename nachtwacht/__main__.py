import sys

from nachtwacht.cli import main

sys.exit(main())
