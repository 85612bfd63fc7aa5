// Small async tools for unit tests of the engine's concurrency primitives.

/** Lets every pending promise callback and one macrotask turn run. */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A promise with its resolve and reject exposed, to finish work exactly when a test says. */
export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
