/**
 * A one-shot signal the tests wait on instead of sleeping.
 * @module
 */

/** A signal: fire() once, and every wait resolves (with its value). */
export class Signal<T = void> {
  /** Resolves with the value fire() was given. */
  readonly fired: Promise<T>;
  #fire!: (value: T) => void;
  #done = false;

  /** A signal not fired yet. */
  constructor() {
    this.fired = new Promise<T>((resolve) => {
      this.#fire = resolve;
    });
  }

  /** Fires the signal (again: no effect). */
  fire(value: T): void {
    this.#done = true;
    this.#fire(value);
  }

  /** Whether it has fired. */
  get done(): boolean {
    return this.#done;
  }
}

/** Signals by name, made on first use by either side. */
export class Signals<T = void> {
  readonly #byName = new Map<string, Signal<T>>();

  /** The signal named name. */
  get(name: string): Signal<T> {
    let s = this.#byName.get(name);
    if (!s) {
      s = new Signal<T>();
      this.#byName.set(name, s);
    }
    return s;
  }
}
