/**
 * Oura's workout `activity` (a lowercase string, e.g. `walking` in tgrk/ex_oura `test/fixture/vcr_cassettes/
 * multiple_workout.json`; the list of values follows open-wearables `backend/app/constants/workout_types/oura.py`,
 * as Oura's spec types it only as `string`) → our workout sport {id, name, slug}.
 *
 * Our ids are Healthbridge's own and shared across providers: running 1, cycling 2, walking 3 as in the demo
 * generator (lib/wearables/demo-world.ts SPORTS) and the rest as numbered in lib/wearables/providers/strava/sports.ts,
 * so the same sport has the same id whichever provider recorded it. An activity without a match is `other` (id 0),
 * its own name kept in the workout's title.
 */
export interface Sport {
  id: number;
  name: string;
  slug: string;
}

const SPORTS: Record<string, Sport> = {};
const add = (id: number, name: string, slug: string, ...ouraActivities: string[]) => {
  for (const activity of ouraActivities.length ? ouraActivities : [slug]) SPORTS[activity] = { id, name, slug };
};
add(1, 'Running', 'running');
add(2, 'Cycling', 'cycling');
add(3, 'Walking', 'walking');
add(4, 'Trail Running', 'trail_running');
add(6, 'Mountain Biking', 'mountain_biking');
add(10, 'Indoor Cycling', 'indoor_cycling');
add(13, 'Swimming', 'swimming');
add(14, 'Hiking', 'hiking');
add(15, 'Alpine Skiing', 'alpine_skiing', 'skiing');
add(17, 'Cross-Country Skiing', 'cross_country_skiing');
add(18, 'Snowboarding', 'snowboarding');
add(20, 'Ice Skating', 'ice_skating');
add(21, 'Inline Skating', 'inline_skating');
add(23, 'Rowing', 'rowing');
add(25, 'Kayaking', 'kayaking');
add(27, 'Stand-Up Paddling', 'stand_up_paddling');
add(28, 'Surfing', 'surfing');
add(31, 'Sailing', 'sailing');
add(32, 'Strength Training', 'strength_training', 'strength_training', 'weightlifting', 'strengthTraining');
add(33, 'CrossFit', 'crossfit');
add(34, 'HIIT', 'hiit', 'hiit', 'circuit_training', 'functional_training');
add(35, 'Yoga', 'yoga');
add(36, 'Pilates', 'pilates');
add(37, 'Elliptical', 'elliptical');
add(38, 'Stair Stepper', 'stair_stepper', 'stair_climbing');
add(39, 'Rock Climbing', 'rock_climbing', 'rock_climbing', 'climbing');
add(40, 'Golf', 'golf');
add(41, 'Skateboarding', 'skateboarding');
add(42, 'Soccer', 'soccer');
add(43, 'Tennis', 'tennis');
add(44, 'Table Tennis', 'table_tennis');
add(45, 'Badminton', 'badminton');
add(46, 'Squash', 'squash');
add(48, 'Pickleball', 'pickleball');
add(49, 'Padel', 'padel');
add(50, 'Basketball', 'basketball');
add(51, 'Volleyball', 'volleyball');
add(52, 'Cricket', 'cricket');
add(53, 'Dance', 'dance', 'dance', 'dancing');

export const OTHER_SPORT: Sport = { id: 0, name: 'Other', slug: 'other' };

export function sportOf(activity: string | null | undefined): Sport {
  return SPORTS[(activity ?? '').trim()] ?? SPORTS[(activity ?? '').trim().toLowerCase()] ?? OTHER_SPORT;
}

/** `strength_training` / `strengthTraining` → `Strength training`: a title for an activity we have no sport for. */
export function humanizeActivity(activity: string): string {
  const words = activity
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .replace(/[_-]+/g, ' ')
    .trim()
    .toLowerCase();
  return words ? words[0].toUpperCase() + words.slice(1) : 'Workout';
}
