"""Input and output shared by every stage: activation stores, dataset and result tables, model directories'
files, atomic writes, provenance and checksums, integrity errors and `reprsim verify`, logs, devices."""
