/** Bytes in a MiB: every `*_MB` variable counts MiB, as MAX_UPLOAD_MB does. */
export const mebibyte = 1024 * 1024;
