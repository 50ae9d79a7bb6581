"""Entity-relation graph: networkx model, compact CSR form and conditional random walks."""
