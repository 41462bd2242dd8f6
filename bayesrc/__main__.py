import sys

from bayesrc.cli import main

sys.exit(main())
