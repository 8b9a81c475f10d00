// A note descriptor that holds JSON text (the FDO dlopen metadata, NVIDIA's CUDA compat note): strict
// UTF-8, then JSON. Bad bytes come back as a value that names what is wrong, never as an exception.

export type NoteJson = { readonly ok: true; readonly json: unknown } | { readonly ok: false; readonly problem: string };

/** `what` names the bytes in a problem: "the descriptor is not JSON (…)". */
export function noteJson(bytes: Uint8Array, what: string): NoteJson {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { ok: false, problem: `${what} is not UTF-8 text` };
  }
  try {
    return { ok: true, json: JSON.parse(text) };
  } catch (error) {
    return { ok: false, problem: `${what} is not JSON (${(error as Error).message})` };
  }
}
