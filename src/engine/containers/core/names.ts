import { randomInt } from 'node:crypto';
import { conflict, invalidParameter, notFound } from '../../../common/errors.js';

/**
 * Container names: generation in Docker's `adjective_surname` style, validation, and the registry
 * that maps names, IDs and unique ID prefixes to containers.
 */

const ADJECTIVES = [
  'admiring',
  'adoring',
  'affectionate',
  'agitated',
  'amazing',
  'angry',
  'awesome',
  'beautiful',
  'blissful',
  'bold',
  'boring',
  'brave',
  'busy',
  'charming',
  'clever',
  'compassionate',
  'competent',
  'condescending',
  'confident',
  'cool',
  'cranky',
  'crazy',
  'dazzling',
  'determined',
  'distracted',
  'dreamy',
  'eager',
  'ecstatic',
  'elastic',
  'elated',
  'elegant',
  'eloquent',
  'epic',
  'exciting',
  'fervent',
  'festive',
  'flamboyant',
  'focused',
  'friendly',
  'frosty',
  'funny',
  'gallant',
  'gifted',
  'goofy',
  'gracious',
  'great',
  'happy',
  'hardcore',
  'heuristic',
  'hopeful',
  'hungry',
  'infallible',
  'inspiring',
  'intelligent',
  'interesting',
  'jolly',
  'jovial',
  'keen',
  'kind',
  'laughing',
  'loving',
  'lucid',
  'magical',
  'modest',
  'musing',
  'mystifying',
  'naughty',
  'nervous',
  'nice',
  'nifty',
  'nostalgic',
  'objective',
  'optimistic',
  'peaceful',
  'pedantic',
  'pensive',
  'practical',
  'priceless',
  'quirky',
  'quizzical',
  'recursing',
  'relaxed',
  'reverent',
  'romantic',
  'sad',
  'serene',
  'sharp',
  'silly',
  'sleepy',
  'stoic',
  'strange',
  'stupefied',
  'suspicious',
  'sweet',
  'tender',
  'thirsty',
  'trusting',
  'unruffled',
  'upbeat',
  'vibrant',
  'vigilant',
  'vigorous',
  'wizardly',
  'wonderful',
  'xenodochial',
  'youthful',
  'zealous',
  'zen',
];

/** Surnames of scientists and engineers. */
const SURNAMES = [
  'agnesi',
  'albattani',
  'allen',
  'almeida',
  'antonelli',
  'archimedes',
  'ardinghelli',
  'aryabhata',
  'austin',
  'babbage',
  'banach',
  'banzai',
  'bardeen',
  'bartik',
  'bassi',
  'beaver',
  'bell',
  'benz',
  'bhabha',
  'bhaskara',
  'black',
  'blackburn',
  'blackwell',
  'bohr',
  'booth',
  'borg',
  'bose',
  'bouman',
  'boyd',
  'brahmagupta',
  'brattain',
  'brown',
  'buck',
  'burnell',
  'cannon',
  'carson',
  'cartwright',
  'carver',
  'cerf',
  'chandrasekhar',
  'chaplygin',
  'chatelet',
  'chatterjee',
  'chaum',
  'chebyshev',
  'clarke',
  'cohen',
  'colden',
  'cori',
  'cray',
  'curie',
  'curran',
  'darwin',
  'davinci',
  'dewdney',
  'dhawan',
  'diffie',
  'dijkstra',
  'dirac',
  'driscoll',
  'dubinsky',
  'easley',
  'edison',
  'einstein',
  'elbakyan',
  'elgamal',
  'elion',
  'ellis',
  'engelbart',
  'euclid',
  'euler',
  'faraday',
  'feistel',
  'fermat',
  'fermi',
  'feynman',
  'franklin',
  'gagarin',
  'galileo',
  'galois',
  'ganguly',
  'gates',
  'gauss',
  'germain',
  'goldberg',
  'goldstine',
  'goldwasser',
  'golick',
  'goodall',
  'gould',
  'greider',
  'grothendieck',
  'haibt',
  'hamilton',
  'haslett',
  'hawking',
  'heisenberg',
  'hellman',
  'hermann',
  'herschel',
  'hertz',
  'heyrovsky',
  'hodgkin',
  'hofstadter',
  'hoover',
  'hopper',
  'hugle',
  'hypatia',
  'ishizaka',
  'jackson',
  'jang',
  'jemison',
  'jennings',
  'jepsen',
  'johnson',
  'joliot',
  'jones',
  'kalam',
  'kapitsa',
  'kare',
  'keldysh',
  'keller',
  'kepler',
  'khayyam',
  'khorana',
  'kilby',
  'kirch',
  'knuth',
  'kowalevski',
  'lalande',
  'lamarr',
  'lamport',
  'leakey',
  'leavitt',
  'lederberg',
  'lehmann',
  'lewin',
  'lichterman',
  'liskov',
  'lovelace',
  'lumiere',
  'mahavira',
  'margulis',
  'matsumoto',
  'maxwell',
  'mayer',
  'mccarthy',
  'mcclintock',
  'mclaren',
  'mclean',
  'mcnulty',
  'meitner',
  'mendel',
  'mendeleev',
  'meninsky',
  'merkle',
  'mestorf',
  'mirzakhani',
  'montalcini',
  'moore',
  'morse',
  'moser',
  'murdock',
  'napier',
  'nash',
  'neumann',
  'newton',
  'nightingale',
  'nobel',
  'noether',
  'northcutt',
  'noyce',
  'panini',
  'pare',
  'pascal',
  'pasteur',
  'payne',
  'perlman',
  'pike',
  'poincare',
  'poitras',
  'proskuriakova',
  'ptolemy',
  'raman',
  'ramanujan',
  'rhodes',
  'ride',
  'ritchie',
  'robinson',
  'roentgen',
  'rosalind',
  'rubin',
  'saha',
  'sammet',
  'sanderson',
  'satoshi',
  'shamir',
  'shannon',
  'shaw',
  'shirley',
  'shockley',
  'shtern',
  'sinoussi',
  'snyder',
  'solomon',
  'spence',
  'stonebraker',
  'sutherland',
  'swanson',
  'swartz',
  'swirles',
  'taussig',
  'tesla',
  'tharp',
  'thompson',
  'torvalds',
  'tu',
  'turing',
  'varahamihira',
  'vaughan',
  'villani',
  'visvesvaraya',
  'volhard',
  'wescoff',
  'wilbur',
  'wiles',
  'williams',
  'williamson',
  'wilson',
  'wing',
  'wozniak',
  'wright',
  'wu',
  'yalow',
  'yonath',
  'zhukovsky',
];

/** A random `adjective_surname`; retry > 0 appends a digit, as Docker does after a collision. */
export function generateName(retry = 0): string {
  for (;;) {
    const name = `${ADJECTIVES[randomInt(ADJECTIVES.length)]}_${SURNAMES[randomInt(SURNAMES.length)]}`;
    // Steve Wozniak is not boring.
    if (name === 'boring_wozniak') continue;
    return retry > 0 ? `${name}${randomInt(10)}` : name;
  }
}

const NAME_PATTERN = /^\/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;

/** Validate a user-given name and return it with its leading slash. */
export function normalizeName(name: string): string {
  if (!NAME_PATTERN.test(name)) {
    throw invalidParameter(`Invalid container name (${name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`);
  }
  return name.startsWith('/') ? name : `/${name}`;
}

/** Names, IDs and ID prefixes of all containers. */
export class NameRegistry {
  private readonly byName = new Map<string, string>();
  private readonly ids = new Set<string>();
  /** Link names (`/parent/alias`) by the container they point to. */
  private readonly linkNames = new Map<string, Set<string>>();

  /** Reserve `name` (with slash) for `id`; 409 when taken by another container. */
  reserve(name: string, id: string): void {
    const owner = this.byName.get(name);
    if (owner !== undefined && owner !== id) {
      throw conflict(
        `Conflict. The container name "${name}" is already in use by container "${owner}". You have to remove (or rename) that container to be able to reuse that name.`,
      );
    }
    this.byName.set(name, id);
  }

  release(name: string): void {
    const owner = this.byName.get(name);
    this.byName.delete(name);
    if (owner !== undefined) this.linkNames.get(owner)?.delete(name);
  }

  /** A legacy link's name (`/parent/alias`) resolves to the linked container, as in dockerd. */
  reserveLink(name: string, id: string): void {
    this.reserve(name, id);
    let names = this.linkNames.get(id);
    if (!names) {
      names = new Set();
      this.linkNames.set(id, names);
    }
    names.add(name);
  }

  /** The link names pointing to a container (list's Names shows them). */
  linkNamesOf(id: string): string[] {
    const names = this.linkNames.get(id);
    return names ? [...names] : [];
  }

  addId(id: string): void {
    this.ids.add(id);
  }

  removeId(id: string): void {
    this.ids.delete(id);
    for (const [name, owner] of this.byName) if (owner === id) this.byName.delete(name);
    this.linkNames.delete(id);
  }

  nameTaken(name: string): boolean {
    return this.byName.has(name);
  }

  /** A generated name that is free. */
  freshName(): string {
    for (let i = 0; i < 100; i++) {
      const name = `/${generateName(i >= 10 ? 1 : 0)}`;
      if (!this.byName.has(name)) return name;
    }
    throw new Error('could not generate a free container name');
  }

  /**
   * Resolve as dockerd does: full ID, then exact name, then unique ID prefix.
   * 404 `No such container: x`; ambiguous prefix is a 400 as well in dockerd.
   */
  resolve(idOrName: string): string {
    if (idOrName === '') throw notFound('No such container: ');
    if (this.ids.has(idOrName)) return idOrName;
    const byName = this.byName.get(idOrName.startsWith('/') ? idOrName : `/${idOrName}`);
    if (byName !== undefined) return byName;
    if (/^[a-f0-9]+$/.test(idOrName)) {
      const matches = [...this.ids].filter((id) => id.startsWith(idOrName));
      if (matches.length === 1) return matches[0]!;
      if (matches.length > 1) {
        throw invalidParameter(`multiple IDs found with provided prefix: ${idOrName}`);
      }
    }
    throw notFound(`No such container: ${idOrName}`);
  }
}
