/**
 * WHOOP sports: v2 workouts name their sport by `sport_name`, a lowercase hyphenated slug (`running`,
 * `hiking-rucking`); the numeric `sport_id` is deprecated ("Will not exist past 09/01/2025", official OpenAPI
 * WorkoutV2) though some accounts still send it. Our WorkoutSport needs an integer id, so the slug is looked up in
 * WHOOP's published sport list (developer.whoop.com/docs/developing/user-data/workout; slugs and ids as collected in
 * the-momentum/open-wearables `backend/app/constants/workout_types/whoop.py`).
 */
const WHOOP_SPORT_IDS: Record<string, number> = {
  activity: -1, running: 0, cycling: 1, baseball: 16, basketball: 17, rowing: 18, fencing: 19, 'field-hockey': 20, football: 21,
  golf: 22, 'ice-hockey': 24, lacrosse: 25, rugby: 27, sailing: 28, skiing: 29, soccer: 30, softball: 31, squash: 32, swimming: 33,
  tennis: 34, 'track-field': 35, volleyball: 36, 'water-polo': 37, wrestling: 38, boxing: 39, dance: 42, pilates: 43, yoga: 44,
  weightlifting: 45, 'cross-country-skiing': 47, 'functional-fitness': 48, duathlon: 49, gymnastics: 51, 'hiking-rucking': 52,
  'horseback-riding': 53, kayaking: 55, 'martial-arts': 56, 'mountain-biking': 57, powerlifting: 59, 'rock-climbing': 60,
  paddleboarding: 61, triathlon: 62, walking: 63, surfing: 64, elliptical: 65, stairmaster: 66, meditation: 70, other: 71, diving: 73,
  'operations-tactical': 74, 'operations-medical': 75, 'operations-flying': 76, 'operations-water': 77, ultimate: 82, climber: 83,
  'jumping-rope': 84, 'australian-football': 85, skateboarding: 86, coaching: 87, 'ice-bath': 88, commuting: 89, gaming: 90,
  snowboarding: 91, motocross: 92, caddying: 93, 'obstacle-course-racing': 94, 'motor-racing': 95, hiit: 96, spin: 97, 'jiu-jitsu': 98,
  'manual-labor': 99, cricket: 100, pickleball: 101, 'inline-skating': 102, 'box-fitness': 103, spikeball: 104, 'wheelchair-pushing': 105,
  'paddle-tennis': 106, barre: 107, 'stage-performance': 108, 'high-stress-work': 109, parkour: 110, 'gaelic-football': 111,
  'hurling-camogie': 112, 'circus-arts': 113, 'massage-therapy': 121, 'strength-trainer': 123, 'watching-sports': 125, 'assault-bike': 126,
  kickboxing: 127, stretching: 128, 'table-tennis': 230, badminton: 231, netball: 232, sauna: 233, 'disc-golf': 234, 'yard-work': 235,
  'air-compression': 236, 'percussive-massage': 237, paintball: 238, 'ice-skating': 239, handball: 240, 'f45-training': 248, padel: 249,
  barrys: 250, 'dedicated-parenting': 251, 'stroller-walking': 252, 'stroller-jogging': 253, toddlerwearing: 254, babywearing: 255,
  barre3: 258, 'hot-yoga': 259, 'stadium-steps': 261, polo: 262, 'musical-performance': 263, 'kite-boarding': 264, 'dog-walking': 266,
  'water-skiing': 267, wakeboarding: 268, cooking: 269, cleaning: 270, 'public-speaking': 272,
};

/** WHOOP's id of a sport slug, or undefined for one not in the list. */
export const whoopSportId = (sportName: string): number | undefined => WHOOP_SPORT_IDS[sportName.trim().toLowerCase()];

/** Every slug in the list (the fake draws its workouts from these). */
export const WHOOP_SPORT_NAMES = Object.keys(WHOOP_SPORT_IDS);

/**
 * Our sport of a WHOOP workout: `id` WHOOP's sport id (the record's deprecated `sport_id` when it has one, else the
 * list's, else -1, WHOOP's generic "Activity"), `slug` the sport name in snake_case, `name` it in words.
 */
export function sportOf(sportName: string | null | undefined, sportId: number | null | undefined): { id: number; name: string; slug: string } {
  const raw = (sportName ?? '').trim().toLowerCase() || 'activity';
  const slug = raw.replace(/[^a-z0-9]+/g, '_').replace(/^_|_$/g, '') || 'activity';
  const name = slug
    .split('_')
    .map((w) => (w === 'hiit' ? 'HIIT' : w.charAt(0).toUpperCase() + w.slice(1)))
    .join(' ');
  const id = typeof sportId === 'number' && Number.isInteger(sportId) ? sportId : (whoopSportId(raw) ?? -1);
  return { id, name, slug };
}
