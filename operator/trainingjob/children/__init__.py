"""Pure: a job's children, built and read back. Their names and labels, the operator <-> trainer contract, the
specs of its pods, Service, key Secret and NetworkPolicy, reading pods back (observe), rank 0's progress report,
and the timeline of where a job's time went."""
