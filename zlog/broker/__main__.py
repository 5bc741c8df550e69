"""`python -m zlog.broker` is `zlog serve`."""

from zlog.broker.serve import main

raise SystemExit(main())
