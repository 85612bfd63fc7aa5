module cni-steward/shim

go 1.26
