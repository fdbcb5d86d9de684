"""Kubernetes I/O of a job, on the cncf.kubernetes provider's hooks (sync for tasks, async for triggers)."""
