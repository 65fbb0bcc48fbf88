from bench.engine_vs_raw import main

raise SystemExit(main())
