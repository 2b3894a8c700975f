import sys

from tfdarshan.cli import main

sys.exit(main())
