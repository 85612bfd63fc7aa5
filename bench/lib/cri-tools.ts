// The programs a bench row that drives containerd's CRI with real pods needs on the machine (each
// row checks them with the test helpers' baseSkipReason, with its own extras).

export const CRI_TOOLS = ['containerd', 'ctr', 'containerd-shim-runc-v2', 'runc', 'gcc', 'tar'] as const;
