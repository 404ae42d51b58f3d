"""Files larger than host memory, sorted through the disk (the command's disk path)."""
