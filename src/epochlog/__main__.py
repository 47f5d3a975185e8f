from epochlog.cli.main import main

raise SystemExit(main())
