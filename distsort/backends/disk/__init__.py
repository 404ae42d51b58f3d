"""Sorted runs on disk: what one task of the disk path does to them (``runs``), their
files (``files``), buffers (``buffers``) and threads (``pipeline``)."""
