/**
 * The real Firestore client (the emulator's) for the simulator: every call runs on real time
 * through {@link VirtualTime.real}, so the client's own timers and clock stay real while the
 * product's are virtual, and virtual time stands still until the call answers.
 */
import type {
  DocumentReference,
  Firestore,
  WriteBatch,
} from '@google-cloud/firestore';
import type { VirtualTime } from './virtual-time.ts';

type Ref = DocumentReference & { readonly __real?: DocumentReference };

/** `db` with each of the calls the product makes run as real I/O of `time`. */
export function realStore(db: Firestore, time: VirtualTime): Firestore {
  const unwrap = (ref: unknown) =>
    ((ref as Ref).__real ?? ref) as DocumentReference;
  const wrapRef = (real: DocumentReference): object => ({
    __real: real,
    id: real.id,
    path: real.path,
    get: () => time.real(() => real.get()),
    create: (data: never) => time.real(() => real.create(data)),
    set: (data: never) => time.real(() => real.set(data)),
    update: (data: never, pre?: never) =>
      time.real(() =>
        pre === undefined ? real.update(data) : real.update(data, pre),
      ),
    delete: (pre?: never) => time.real(() => real.delete(pre)),
    withConverter: (converter: never) => wrapRef(real.withConverter(converter)),
  });
  const wrapCollection = (
    real: FirebaseFirestore.CollectionReference,
  ): object => ({
    doc: (id: string) => wrapRef(real.doc(id)),
    withConverter: (converter: never) =>
      wrapCollection(real.withConverter(converter)),
    get: () => time.real(() => real.get()),
  });
  // The batch's writes are staged locally; only its commit is I/O.
  const wrapBatch = (real: WriteBatch): object => ({
    create(ref: unknown, data: never) {
      real.create(unwrap(ref), data);
      return this;
    },
    set(ref: unknown, data: never) {
      real.set(unwrap(ref), data);
      return this;
    },
    update(ref: unknown, data: never, pre?: never) {
      if (pre === undefined) {
        real.update(unwrap(ref), data);
      } else {
        real.update(unwrap(ref), data, pre);
      }
      return this;
    },
    delete(ref: unknown, pre?: never) {
      real.delete(unwrap(ref), pre);
      return this;
    },
    commit: () => time.real(() => real.commit()),
  });
  return {
    databaseId: db.databaseId,
    collection: (name: string) => wrapCollection(db.collection(name)),
    getAll: (...refs: unknown[]) =>
      time.real(() => db.getAll(...refs.map(unwrap))),
    batch: () => wrapBatch(db.batch()),
  } as unknown as Firestore;
}
