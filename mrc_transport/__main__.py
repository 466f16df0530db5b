from mrc_transport.cli.main import main

raise SystemExit(main())
