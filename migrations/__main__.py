"""``python -m migrations [--print] [DIALECT ...]``: render the registry for each dialect folder here
(or for the dialects named) from :mod:`sqlrp.registry.schema`."""

import sys

from sqlrp.registry.schema import main

sys.exit(main())
