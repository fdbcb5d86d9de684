"""What the Airflow worker does with files on the shared volume that training pods also write."""
