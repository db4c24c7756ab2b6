#!/usr/bin/env python3
"""The web console in Debian's headless Chromium (chromium, chromium-driver, python3-selenium):
sign in with a token, search as you type, scroll to a second page, open a card with its
thumbnail and its full picture, open a department's summary, open a year and a month of the
sales calendar, see a change made by another client appear (and, once the server holds another
database, the directory listed again and its changes), and edit a field with an update
mask. Every input has a label; the keys reach the search, the results and the editor. A
screenshot is kept in the artifacts directory (ROSTER_ARTIFACTS, or .build/test-artifacts).
Then a picture down and up over HTTP/1.1 as a page would send it (urllib), and --no-console.

Run with Debian's /usr/bin/python3, which has python3-selenium.

Usage: console_test.py ROSTER_BINARY
"""
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unicodedata
import unittest
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROSTER = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/roster")
ARTIFACTS = os.environ.get("ROSTER_ARTIFACTS", os.path.join(ROOT, ".build", "test-artifacts"))
WORK = tempfile.mkdtemp(prefix="roster-console-")
HANG = 60

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import servers  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "identity"))
import idp  # noqa: E402

SERVER = None
LOG = None
BASE = None
TOKENS = {}
BROWSER = None
PROVIDER = None


def setUpModule():
    global SERVER, LOG, BASE, BROWSER, PROVIDER
    TOKENS.update(servers.write_tokens(ROSTER, WORK, ("reader", "writer", "admin")))
    PROVIDER = idp.Provider()
    PROVIDER.add_key("RS256")
    LOG = open(os.path.join(WORK, "server.log"), "w")
    SERVER = subprocess.Popen(
        [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "console.sqlite"), "--seed-employees", "120",
         "--seed-sales-per-employee", "4", "--tokens", os.path.join(WORK, "tokens"),
         "--oidc-issuer", PROVIDER.issuer, "--oidc-audience", "roster",
         "--oidc-console-client-id", "roster-console"],
        stdout=subprocess.PIPE, stderr=LOG, text=True)
    line = SERVER.stdout.readline()
    if not line.startswith("listening on "):
        raise RuntimeError("server did not start: " + open(os.path.join(WORK, "server.log")).read())
    BASE = "http://" + line.split()[-1]
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                     f"--user-data-dir={WORK}/chromium"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        BROWSER = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
        BROWSER.set_page_load_timeout(HANG)
    except Exception:
        # tearDownModule does not run when this fails: stop the server here.
        servers.stop(SERVER, LOG)
        PROVIDER.close()
        raise


def tearDownModule():
    try:
        if BROWSER is not None:
            BROWSER.quit()
    finally:
        servers.stop(SERVER, LOG)
        PROVIDER.close()
        shutil.rmtree(WORK, ignore_errors=True)


def connect(method, message, role="writer", base=None):
    """A Connect JSON call from another client (urllib), to the module's server or `base`."""
    request = urllib.request.Request(
        f"{base or BASE}/roster.v1.{method}", data=json.dumps(message).encode(), method="POST",
        headers={"content-type": "application/json", "authorization": f"Bearer {TOKENS[role]}"})
    with urllib.request.urlopen(request, timeout=HANG) as response:
        return json.loads(response.read())


class Page(unittest.TestCase):
    """What the tests in a browser share: waiting for the page, and reading it."""

    def wait(self, what, condition):
        try:
            # The page re-renders its lists as answers arrive: an element found in one poll can be
            # gone by the time it is read. That poll fails and the next one looks again.
            return WebDriverWait(BROWSER, HANG, poll_frequency=0.1,
                                 ignored_exceptions=(StaleElementReferenceException,)).until(lambda _: condition())
        except Exception:
            os.makedirs(ARTIFACTS, exist_ok=True)
            BROWSER.save_screenshot(os.path.join(ARTIFACTS, "console-failure.png"))
            raise AssertionError(f"timed out waiting for {what}; page status: "
                                 f"{BROWSER.find_element(By.ID, 'status').text!r}")

    def by_id(self, element):
        return BROWSER.find_element(By.ID, element)

    def rows(self):
        return BROWSER.find_elements(By.CSS_SELECTOR, "#results li button")

    def row_texts(self):
        """The rows' texts, read in one step in the page (a re-render cannot fall between them)."""
        return BROWSER.execute_script(
            "return [...document.querySelectorAll('#results li button')].map((b) => b.innerText);")


class Console(Page):
    def test_the_directory_in_a_browser(self):
        BROWSER.get(BASE + "/")
        self.assertEqual(BROWSER.title, "Roster")
        # Tokens are on: the first calls are refused, and the page asks once.
        dialog = self.by_id("token-dialog")
        self.wait("the token prompt", lambda: dialog.get_attribute("open") is not None)
        self.by_id("token-input").send_keys(TOKENS["writer"] + Keys.ENTER)
        self.wait("the first page", lambda: len(self.rows()) >= 30)

        # Every control has a label a screen reader reads.
        unlabeled = BROWSER.execute_script("""
            return [...document.querySelectorAll('input, select')].filter((control) =>
                !(control.labels && control.labels.length) && !control.getAttribute('aria-label')
            ).map((control) => control.id);""")
        self.assertEqual(unlabeled, [])

        # Search as you type, from the keyboard: the first results in one round trip.
        search = self.by_id("search")
        search.click()
        search.send_keys("an")
        def folded(text):
            return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
        self.wait("search results", lambda: "employees shown" in self.by_id("result-count").text
                  and (texts := self.row_texts()) and all("an" in folded(text.split(" · ")[0]) for text in texts))
        search.send_keys(Keys.CONTROL, "a")
        search.send_keys(Keys.DELETE)
        self.wait("the whole directory again", lambda: len(self.rows()) >= 30)
        first_page = len(self.rows())

        # Scrolling the list loads the next keyset page.
        BROWSER.execute_script("const list = document.getElementById('results'); list.scrollTop = list.scrollHeight;")
        self.wait("a second page", lambda: len(self.rows()) > first_page)

        # A card: the inline thumbnail, then the full picture fetched on demand (a stream).
        with_picture = BROWSER.execute_script(
            "return [...document.querySelectorAll('#results li button')].findIndex((b) => b.querySelector('img'));")
        self.assertGreaterEqual(with_picture, 0, "the demo directory has pictures")
        self.rows()[with_picture].send_keys(Keys.ENTER)
        self.wait("the card", lambda: self.by_id("card").is_displayed() and self.by_id("card-name").text)
        self.assertTrue(BROWSER.execute_script("return document.getElementById('card-thumbnail').naturalWidth > 0"))
        self.by_id("picture-button").click()
        self.wait("the full picture", lambda: BROWSER.execute_script(
            "const image = document.getElementById('picture-image'); return image.complete && image.naturalWidth > 0"))
        self.assertIn("bytes", self.by_id("picture-caption").text)

        # Departments and a summary.
        self.wait("headcounts", lambda: BROWSER.find_elements(By.CSS_SELECTOR, "#department-rows button"))
        BROWSER.find_elements(By.CSS_SELECTOR, "#department-rows button")[0].click()
        self.wait("a department summary", lambda: "employees" in self.by_id("department-summary").text)

        # The sales calendar: a year, then a month, each level loaded when opened.
        self.wait("the years", lambda: BROWSER.find_elements(By.CSS_SELECTOR, "#calendar-years > details > summary"))
        BROWSER.find_elements(By.CSS_SELECTOR, "#calendar-years > details > summary")[0].click()
        self.wait("the months", lambda: BROWSER.find_elements(By.CSS_SELECTOR, "#calendar-years details details"))
        # A year reads as a chart: a bar per month, its numbers in the bar's title (on hover).
        months = BROWSER.find_elements(By.CSS_SELECTOR, "#calendar-years > details > details")
        bars = BROWSER.find_elements(By.CSS_SELECTOR, "#calendar-years > details > svg.chart rect")
        self.assertEqual(len(bars), len(months))
        titles = [bar.find_element(By.TAG_NAME, "title").get_attribute("textContent") for bar in bars]
        self.assertEqual(titles, [month.find_element(By.TAG_NAME, "summary").text for month in months])
        self.assertTrue(all(int(bar.get_attribute("height")) >= 0 for bar in bars))
        self.assertTrue(any(int(bar.get_attribute("height")) > 0 for bar in bars))
        BROWSER.find_elements(By.CSS_SELECTOR, "#calendar-years details details > summary")[0].click()
        self.wait("the days", lambda: BROWSER.find_elements(By.CSS_SELECTOR, "#calendar-years details details li"))

        # A change made by another client appears in the live list.
        created = connect("Directory/CreateEmployee", {"employee": {
            "name": "Browser Watched", "department": "Design", "email": "browser.watched@example.com",
            "startDate": "2026-11-26"}})
        self.wait("the change to appear", lambda: BROWSER.find_elements(
            By.CSS_SELECTOR, f"#change-list li[data-guid='{created['guid']}']"))

        # Editing a field sends it alone, with an update mask.
        shown = self.by_id("card-name").text
        guid = BROWSER.execute_script("return document.querySelector('#results button[aria-current]').dataset.guid")
        # Vacation days are personal: the writer edits them unseen, an admin reads them.
        before = connect("Directory/GetEmployee", {"guid": guid}, role="admin")
        vacation = self.by_id("edit-vacation")
        vacation.clear()
        vacation.send_keys(str(before.get("vacationDays", 0) + 3))
        vacation.send_keys(Keys.ENTER)
        self.wait("the save", lambda: "Saved: vacationDays" in self.by_id("edit-status").text)
        after = connect("Directory/GetEmployee", {"guid": guid}, role="admin")
        self.assertEqual(after.get("vacationDays", 0), before.get("vacationDays", 0) + 3)
        self.assertEqual((after["name"], after["department"], after.get("email")),
                         (before["name"], before["department"], before.get("email")))
        self.assertEqual(shown, after["name"])

        # Signed in with a token, the change is its holder's: the writer's token (no label).
        self.assertRegex(self.by_id("change-list").text, r"by token:[0-9a-f]{16}", "the token's holder is the author")

        os.makedirs(ARTIFACTS, exist_ok=True)
        BROWSER.set_window_size(1400, 1500)
        BROWSER.execute_script("window.scrollTo(0, 0)")
        BROWSER.save_screenshot(os.path.join(ARTIFACTS, "console.png"))
        # The calls refused before the token was given are the only errors the page saw.
        errors = [entry["message"] for entry in BROWSER.get_log("browser") if entry["level"] == "SEVERE"
                  and "status of 401" not in entry["message"]]
        self.assertEqual(errors, [], "the page logged errors")

    def card_terms(self, person):
        """Finds `person` by name, opens their card and returns its field labels."""
        search = self.by_id("search")
        search.clear()
        search.send_keys(person["name"])
        row = f"#results li button[data-guid='{person['guid']}']"
        self.wait("the person's row", lambda: BROWSER.find_elements(By.CSS_SELECTOR, row))
        BROWSER.find_element(By.CSS_SELECTOR, row).click()
        self.wait("the card", lambda: self.by_id("card-name").text == person["name"])
        return [term.text for term in BROWSER.find_elements(By.CSS_SELECTOR, "#card-fields dt")]

    def test_z_a_provider_token_shows_what_its_caller_may_see(self):
        """Signed in with the identity provider's token (pasted, as a static one), a reader sees
        their own phone and address on their card, and no one else's."""
        me, other = connect("Directory/ListEmployees", {"pageSize": 2}, role="admin")["employees"]
        token = PROVIDER.token(PROVIDER.keys[0], sub="console-reader", email=me["email"])
        BROWSER.get(BASE + "/")
        BROWSER.execute_script("sessionStorage.clear()")
        BROWSER.get(BASE + "/")
        dialog = self.by_id("token-dialog")
        self.wait("the token prompt", lambda: dialog.get_attribute("open") is not None)
        self.by_id("token-input").send_keys(token + Keys.ENTER)
        for person, sees in ((me, True), (other, False)):
            terms = self.card_terms(person)
            self.assertIn("E-mail", terms)
            for label in ("Phone", "Address", "Vacation days"):
                self.assertEqual(label in terms, sees, (person["name"], label, terms))
        BROWSER.execute_script("sessionStorage.clear()")

    def test_z_signing_in_at_the_provider(self):
        """The token dialog offers the provider's sign-in: the browser goes to the provider and
        back with a code, which the page trades (PKCE) for an access token it then calls with."""
        me, other = connect("Directory/ListEmployees", {"pageSize": 2}, role="admin")["employees"]
        PROVIDER.login = {"sub": "browser-person", "email": me["email"]}
        BROWSER.get(BASE + "/")
        BROWSER.execute_script("sessionStorage.clear()")
        BROWSER.get(BASE + "/")
        dialog = self.by_id("token-dialog")
        self.wait("the token prompt", lambda: dialog.get_attribute("open") is not None)
        self.wait("the provider's button", lambda: self.by_id("provider-sign-in").is_displayed())
        self.by_id("provider-sign-in").click()
        self.wait("the first page, signed in", lambda: len(self.rows()) >= 30)
        self.assertEqual(BROWSER.current_url, BASE + "/", "the code left the address bar")
        token = BROWSER.execute_script("return sessionStorage.getItem('roster-token')")
        self.assertEqual(token.count("."), 2, "the console calls with the provider's access token")
        self.assertIn("Phone", self.card_terms(me), "signed in as themselves, the person sees their own phone")
        BROWSER.execute_script("sessionStorage.clear()")

    def test_files_are_cached_by_etag(self):
        with urllib.request.urlopen(BASE + "/console.js", timeout=HANG) as response:
            etag = response.headers["etag"]
            self.assertTrue(response.headers["content-type"].startswith("text/javascript"))
            self.assertIn("script-src 'self'", response.headers["content-security-policy"])
        request = urllib.request.Request(BASE + "/console.js", headers={"if-none-match": etag})
        with self.assertRaises(urllib.error.HTTPError) as unchanged:
            urllib.request.urlopen(request, timeout=HANG)
        self.assertEqual(unchanged.exception.code, 304)


def envelope(message):
    body = json.dumps(message).encode()
    return struct.pack(">BI", 0, len(body)) + body


def connect_stream(method, messages, role="writer"):
    """A Connect JSON stream over HTTP/1.1 (urllib): every request message in one body, as a
    browser sends it; the reply's messages and its end-of-stream message."""
    request = urllib.request.Request(
        f"{BASE}/roster.v1.{method}", data=b"".join(envelope(m) for m in messages), method="POST",
        headers={"content-type": "application/connect+json", "authorization": f"Bearer {TOKENS[role]}"})
    with urllib.request.urlopen(request, timeout=HANG) as response:
        body = response.read()
    replies = []
    while body:
        flags, length = struct.unpack(">BI", body[:5])
        replies.append((flags, json.loads(body[5:5 + length])))
        body = body[5 + length:]
    assert replies and replies[-1][0] == 2, replies[-1:]
    return [message for _, message in replies[:-1]], replies[-1][1]


class PicturesOverHTTP1(unittest.TestCase):
    """A picture down and up over HTTP/1.1, as a page would: GetPicture's stream, then
    PutPicture's whole stream (a header, then the bytes in chunks) in one body."""

    def test_picture_round_trip(self):
        page = connect("Directory/ListEmployees", {"pageSize": 50, "readMask": "guid,hasPicture"}, role="reader")
        owner = next(e["guid"] for e in page["employees"] if e.get("hasPicture"))
        parts, end = connect_stream("Pictures/GetPicture", [{"guid": owner}], role="reader")
        self.assertEqual(end, {})
        picture = b"".join(base64.b64decode(part.get("data", "")) for part in parts)
        self.assertEqual(len(picture), int(parts[0]["totalSize"]))
        self.assertEqual(picture[:2], b"\xff\xd8")
        target = connect("Directory/CreateEmployee", {"employee": {
            "name": "Uploaded Una", "department": "Design", "startDate": "2020-01-01"}})["guid"]
        upload = [{"header": {"guid": target, "contentType": "image/jpeg", "totalSize": str(len(picture))}}]
        upload += [{"chunk": base64.b64encode(picture[offset:offset + 60000]).decode()}
                   for offset in range(0, len(picture), 60000)]
        stored, end = connect_stream("Pictures/PutPicture", upload)
        self.assertEqual(end, {})
        self.assertEqual(stored[0]["etag"], parts[0]["etag"])
        card = connect("Directory/GetEmployee", {"guid": target}, role="reader")
        self.assertTrue(card["hasPicture"])
        self.assertTrue(base64.b64decode(card["thumbnail"]).startswith(b"\xff\xd8"))


class ConsoleAfterTheLogMovedOn(Page):
    """The live change list when the log no longer holds its position (pruned while it was
    away, a bulk load logged as a gap, another database at the same address): the watch is
    refused OUT_OF_RANGE, and the page lists the directory again and watches from now, instead
    of retrying the lost position for ever. (After `Console`: its first page load asks for the
    token, on another origin.)"""

    def test_another_database_at_the_same_address(self):
        port = servers.free_port()
        base = f"http://127.0.0.1:{port}"

        def start(name):
            log = open(os.path.join(WORK, f"{name}.log"), "w")
            server = subprocess.Popen(
                [ROSTER, "serve", "--port", str(port), "--db", os.path.join(WORK, f"{name}.sqlite"),
                 "--seed-employees", "5", "--no-seed-pictures", "--tokens", os.path.join(WORK, "tokens")],
                stdout=subprocess.PIPE, stderr=log, text=True)
            line = server.stdout.readline()
            if not line.startswith("listening on "):
                servers.stop(server, log)
                raise AssertionError(f"{name} did not start: " + open(os.path.join(WORK, f"{name}.log")).read())
            return server, log

        def create(name):
            return connect("Directory/CreateEmployee", {"employee": {
                "name": name, "department": "Design", "startDate": "2026-12-01"}}, base=base)["guid"]

        def shown(guid):
            return BROWSER.find_elements(By.CSS_SELECTOR, f"#change-list li[data-guid='{guid}']")

        server, log = start("first")
        try:
            BROWSER.get(base + "/")
            dialog = self.by_id("token-dialog")
            self.wait("the token prompt", lambda: dialog.get_attribute("open") is not None)
            self.by_id("token-input").send_keys(TOKENS["writer"] + Keys.ENTER)
            self.wait("the first page", lambda: len(self.rows()) == 5)
            # Two changes: the page's position is past where a new database's log ends.
            first, second = create("Before Restart"), create("Before Restart Too")
            self.wait("the changes to appear", lambda: shown(first) and shown(second))
        finally:
            servers.stop(server, log)
        server, log = start("second")
        try:
            self.wait("the missed changes noted", lambda: BROWSER.find_elements(By.CSS_SELECTOR, "#change-list li.gap"))
            # The list is the new database's, and changes to it appear.
            self.wait("the new directory", lambda: len(self.rows()) == 5 and not any(
                "Before Restart" in text for text in self.row_texts()))
            after = create("After Restart")
            self.wait("a change after the restart", lambda: shown(after))
        finally:
            servers.stop(server, log)


class NoConsole(unittest.TestCase):
    def test_no_console_turns_it_off(self):
        log = open(os.path.join(WORK, "off.log"), "w")
        server = subprocess.Popen(
            [ROSTER, "serve", "--port", "0", "--db", os.path.join(WORK, "off.sqlite"), "--seed-employees", "5",
             "--no-seed-pictures", "--no-console"], stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            address = server.stdout.readline().split()[-1]
            with self.assertRaises(urllib.error.HTTPError) as missing:
                urllib.request.urlopen(f"http://{address}/", timeout=HANG)
            self.assertEqual(missing.exception.code, 404)
        finally:
            servers.stop(server, log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
