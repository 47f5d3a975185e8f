"""Topic and partition lifecycle decisions: creation, deletion, leadership."""
