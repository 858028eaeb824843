import sys

from triton_npu.cli import main

sys.exit(main())
