"""Input and output shared by every stage: activation stores, dataset tables, atomic writes, provenance, logs, devices."""
