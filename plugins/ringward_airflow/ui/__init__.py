"""ringward in the Airflow UI: Migration, Repair and Cluster pages served by a FastAPI app of an Airflow plugin.

Every page and JSON endpoint requires Airflow's own authentication and permissions (see `app.py`).
"""
