"""The workflow's stages, one sub-package per DAG stage. A stage imports the libraries, never another stage."""
