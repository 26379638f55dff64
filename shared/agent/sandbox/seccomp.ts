// SysV IPC is memory no limit sees: a shared memory segment a program detaches is in no
// process's RSS, no memfd, no RLIMIT_DATA, and the run's own IPC namespace has the kernel's
// unbounded defaults (12 segments of 64 MiB held 768 MiB of host memory under a 128 MiB limit).
// bubblewrap installs this seccomp filter (`--seccomp FD`): shmget, msgget and semget fail with
// EPERM, as do foreign-ABI calls (x32, 32-bit) through which the same calls would pass unseen.
// So do ptrace, process_vm_readv/writev and pidfd_getfd: the program shares the keeper's uid, and
// a review's exploit took the keeper over with them (made it exec `sleep` and wrote its `exit`
// line) to have the worker read the work dir while the program still ran (keeper.ts).
// Classic BPF over `struct seccomp_data` (nr at offset 0, arch at 4).

const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_EPERM = 0x00050000 | 1;
const X32_SYSCALL_BIT = 0x40000000;

/** Per host architecture: its audit arch, and the numbers of shmget, msgget, semget, ptrace,
 *  process_vm_readv, process_vm_writev and pidfd_getfd. */
const ARCHES: Partial<Record<NodeJS.Architecture, { audit: number; calls: number[] }>> = {
  x64: { audit: 0xc000003e, calls: [29, 68, 64, 101, 310, 311, 438] },
  arm64: { audit: 0xc00000b7, calls: [194, 186, 190, 117, 270, 271, 438] },
};

type Insn = [code: number, jt: number, jf: number, k: number];

/** The filter program for this host, or null where deepq knows no syscall numbers (no filter). */
export function ipcSeccompFilter(arch: NodeJS.Architecture = process.arch): Buffer | null {
  const a = ARCHES[arch];
  if (!a) return null;
  const n = a.calls.length;
  const program: Insn[] = [
    [LD_W_ABS, 0, 0, 4],
    [JEQ_K, 1, 0, a.audit],
    [RET_K, 0, 0, RET_EPERM],
    [LD_W_ABS, 0, 0, 0],
    [JGE_K, n + 1, 0, X32_SYSCALL_BIT],
    // Each refused call jumps over the rest and the allow, to the refusal.
    ...a.calls.map((nr, i): Insn => [JEQ_K, n - i, 0, nr]),
    [RET_K, 0, 0, RET_ALLOW],
    [RET_K, 0, 0, RET_EPERM],
  ];
  const out = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jt, i * 8 + 2);
    out.writeUInt8(jf, i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
