"""Partition state on a broker: leadership, leader epochs, high watermark, fencing."""
