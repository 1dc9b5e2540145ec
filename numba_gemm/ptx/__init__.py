"""The inline-PTX intrinsics (128-bit vector loads, ``cp.async``, ``mma.sync`` and ``ldmatrix``,
``wgmma``) and their plain-Python models for the CUDA simulator. Every ``@intrinsic`` with
``ir.InlineAsm`` lives here, so a change of compiler backend touches this folder only."""
