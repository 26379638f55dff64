// A role's sandbox settings: how run_code is isolated and what it may use. Safe by default;
// `mode: none` runs without isolation and is only for hosts that cannot run bubblewrap.
import { z } from 'zod';

export const SandboxSchema = z
  .object({
    /** `bwrap`: bubblewrap, checked at worker start (fail closed). `none`: no isolation, a warning per call. */
    mode: z.enum(['bwrap', 'none']).default('bwrap'),
    /** Wall-clock limit of one run; the process tree is killed at it. */
    wallSeconds: z.number().positive().max(3600).default(30),
    /** CPU seconds per process (RLIMIT_CPU). */
    cpuSeconds: z.number().int().positive().max(3600).default(10),
    /**
     * Memory in MiB: writable memory per process (RLIMIT_DATA), and the resident memory of the
     * whole run (every process of it, measured every 250 ms; the run is killed past it).
     */
    memoryMb: z.number().int().min(16).max(65536).default(512),
    /** Processes and threads inside the sandbox (RLIMIT_NPROC in its own user namespace). */
    maxProcesses: z.number().int().min(1).max(4096).default(64),
    /** stdout plus stderr captured; past it the run is killed and the result says so. */
    outputBytes: z
      .number()
      .int()
      .min(1024)
      .default(1024 * 1024),
    /** The largest file a run may write (RLIMIT_FSIZE), and the work dir's total. */
    fileBytes: z
      .number()
      .int()
      .min(1024)
      .default(16 * 1024 * 1024),
  })
  .strict();
export type SandboxConfig = z.infer<typeof SandboxSchema>;
