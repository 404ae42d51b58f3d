"""The plan floor: pure integers.  Batcher's network between chunks, placement, out-of-core runs
and segments, the k-way co-ranks, the cluster view and the `SortPlan` of a sort."""
