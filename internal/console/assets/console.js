// The console's only script (served from /assets/, as the CSP wants). The
// pages work without it; it saves clicks.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // Filters that are choices apply at once.
  for (const el of document.querySelectorAll("select.autosubmit")) {
    el.addEventListener("change", () => el.form.submit());
  }
  // Copy a block (the stored body) to the clipboard.
  for (const el of document.querySelectorAll("button[data-copy]")) {
    el.addEventListener("click", async () => {
      const src = document.getElementById(el.dataset.copy);
      if (!src || !navigator.clipboard) return;
      await navigator.clipboard.writeText(src.textContent);
      el.textContent = "Copied";
      setTimeout(() => { el.textContent = "Copy"; }, 1500);
    });
  }
  // A confirmation button is pressed once: the action runs once.
  for (const form of document.querySelectorAll("form[method=post]")) {
    form.addEventListener("submit", () => {
      for (const b of form.querySelectorAll("button[type=submit]")) b.disabled = true;
    });
  }
  // Times in the reader's zone, as a tooltip beside the UTC shown.
  for (const el of document.querySelectorAll("[data-utc]")) {
    const d = new Date(el.dataset.utc);
    if (!isNaN(d)) el.title = d.toLocaleString();
  }
});
