"""Entity-relation graph: the compact CSR form, its statistics and conditional random walks."""
