"""The only package that imports confluent_kafka: clients, admin, the embedded broker launcher."""
