"""In-memory clusters (imports no Kafka client): the engine's task IO (`task_io`) and the control plane's
ports (`clusters`) on partition logs and consumer groups held by the process, for fast tests of rules and
for demos; `replication.kafka` is the Apache Kafka implementation of the same Protocols."""
