"""Schemas that travel with the data: the Confluent wire format, subject naming under a flow's replication
policy, a Confluent-compatible registry client, the subject sync and the schema-ID rewrite of records."""
