from replication.cli import main

raise SystemExit(main())
